"""The one scrubber's cost: encoded-form matching vs. a plain str.replace of the raw values, side by side.

Run: .venv/bin/python bench/scrubber.py [--mb 1] [--secrets 10]
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.secrets import MASK, Scrubber


def best_of(fn, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--secrets", type=int, default=10)
    args = parser.parse_args()
    secrets = [f"sk-bench-{i:03d}-Zq8Lm2Xv/+=" for i in range(args.secrets)]
    prose = "The quick brown fox jumps over the lazy dog; inventory 12, DEMO-001. " * 10
    blob = base64.b64encode(bytes(range(256)) * 4).decode()
    unit = prose + blob + "\n"
    text = unit * max(1, int(args.mb * 1024 * 1024 / len(unit)))
    leaky = text[: len(text) // 2] + secrets[0] + text[len(text) // 2 :]
    scrubber = Scrubber(secrets)

    def plain() -> str:
        out = leaky
        for s in secrets:
            out = out.replace(s, MASK)
        return out

    t_plain = best_of(plain)
    t_scrub = best_of(lambda: scrubber.text(leaky))
    print(f"text {len(leaky) / 1e6:.2f} MB, {len(secrets)} secrets")
    print(f"str.replace (raw only):   {t_plain * 1000:8.1f} ms")
    print(f"Scrubber (encoded forms): {t_scrub * 1000:8.1f} ms  ({t_scrub / t_plain:.0f}x, "
          f"{len(leaky) / t_scrub / 1e6:.1f} MB/s)")
    t_small = best_of(lambda: scrubber.text(prose), runs=200)
    print(f"one 0.7 KB result:        {t_small * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
