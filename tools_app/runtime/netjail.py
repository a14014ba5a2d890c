"""The `public` network of a tenant's LOCAL server: outbound to the internet only, never to the host or private ranges.

Run as a launcher in front of bubblewrap (`python netjail.py -- bwrap ... -- server`): bubblewrap gives the sandbox
a network namespace of its own (as for `none`) and waits (`--block-fd`) while this launcher
1. attaches a user-mode network stack to it (slirp4netns, with `--disable-host-loopback`: its gateway 10.0.2.2 does
   not lead to the host's 127.0.0.1; DNS goes to 10.0.2.3, forwarded to the host's resolver);
2. adds `unreachable` routes inside it for every range that is not the internet: loopback, private (10/8,
   172.16/12, 192.168/16), carrier-grade NAT, link-local (169.254/16, the cloud metadata address included),
   multicast and reserved ranges, and each address of the host itself, so no connection to them leaves the
   namespace, whatever DNS answered. IPv6 is not offered (slirp4netns without `--enable-ipv6`).
3. lets bubblewrap go on. The server inherits no capability, so it cannot change the routes.
slirp4netns makes the outbound connections from the host as this process's user, so the host's firewall applies too.
It ends with the sandbox (and with this launcher: `--exit-fd`). This module uses only the standard library: it runs
as a script by path, before any of Toolhub is importable in the child.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence

SLIRP = "slirp4netns"
INSTALL_HINT = "install slirp4netns (Debian/Ubuntu: `apt-get install slirp4netns`)"
# Inside the namespace: the slirp network, its DNS forwarder and the resolv.conf the sandbox gets.
SLIRP_DNS = "10.0.2.3"
SLIRP_ADDRESS, SLIRP_GATEWAY = "10.0.2.100/24", "10.0.2.2"
IP = shutil.which("ip", path="/usr/sbin:/sbin:/usr/bin:/bin") or "ip"
NSENTER = shutil.which("nsenter", path="/usr/bin:/bin:/usr/sbin:/sbin") or "nsenter"
RESOLV_CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "netjail_resolv.conf")  # names SLIRP_DNS
BLOCKED_V4: tuple[str, ...] = (
    "0.0.0.0/8",  # "this network"
    "10.0.0.0/8",  # private (the slirp network 10.0.2.0/24 stays reachable: its own, more specific route)
    "100.64.0.0/10",  # carrier-grade NAT
    "127.0.0.0/8",  # loopback (inside the namespace, its own lo; never the host's)
    "169.254.0.0/16",  # link-local, the cloud metadata service (169.254.169.254) included
    "172.16.0.0/12",  # private
    "192.0.0.0/24",  # IETF protocol assignments
    "192.168.0.0/16",  # private
    "198.18.0.0/15",  # benchmarking
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, broadcast
)


def available(slirp: str = SLIRP) -> str | None:
    """The slirp4netns executable, or None."""
    return shutil.which(slirp)


def host_addresses() -> list[str]:
    """Every IPv4 address of this host (each gets its own unreachable route in the namespace)."""
    try:
        out = subprocess.run([IP, "-j", "-4", "addr", "show"], capture_output=True, text=True, timeout=10,
                             check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for link in json.loads(out or "[]"):
        for info in link.get("addr_info") or []:
            local = info.get("local")
            if local:
                found.append(str(ipaddress.ip_address(local)))
    return found


def blocked_routes(extra: Sequence[str] = ()) -> list[str]:
    """The destinations that get an `unreachable` route: the non-internet ranges, the host's addresses, `extra`."""
    routes = list(BLOCKED_V4)
    for address in [*host_addresses(), *extra]:
        network = ipaddress.ip_network(address, strict=False)
        if isinstance(network, ipaddress.IPv4Network) and str(network) not in routes and not any(
                network.subnet_of(ipaddress.IPv4Network(b)) for b in BLOCKED_V4):
            routes.append(str(network))  # once: a second `ip route add` of one address fails ("File exists")
    return routes


def _fail(message: str) -> int:
    sys.stderr.write(f"toolhub netjail: {message}\n")
    sys.stderr.flush()
    return 126


def _parse(argv: list[str]) -> tuple[list[str], list[str]]:
    """(extra blocked CIDRs, the bubblewrap command line) of `[--block CIDR]... -- bwrap ARGS...`."""
    extra: list[str] = []
    while argv and argv[0] != "--":
        if argv[0] != "--block" or len(argv) < 2:
            raise ValueError(f"unknown option {argv[0]!r}; accepted: --block CIDR, then -- and the bwrap command")
        extra.append(argv[1])
        argv = argv[2:]
    if len(argv) < 2:
        raise ValueError("no bubblewrap command line after --")
    return extra, argv[1:]


def _child_pid(info_r: int) -> int | None:
    """The sandbox's pid from bubblewrap's --info-fd JSON, or None when it ended before saying."""
    raw = b""
    while b"}" not in raw:
        chunk = os.read(info_r, 4096)
        if not chunk:
            break
        raw += chunk
    try:
        return int(json.loads(raw.split(b"}")[0] + b"}")["child-pid"])
    except (ValueError, KeyError):
        return None


NS_GET_USERNS = 0xB701  # ioctl on a namespace fd: its owning user namespace


def _owner_userns(pid: int) -> int | None:
    """An fd of the user namespace owning the sandbox's network namespace (None when it is this process's own).

    Not `/proc/<pid>/ns/user`, which slirp4netns joins when not told otherwise: with `--disable-userns` the sandbox
    moves into a nested user namespace, which holds no capability over a network namespace its parent owns. Whether
    slirp4netns read the outer or the nested one depended on how far bubblewrap had got (as root too: a CI run failed
    with `setns(CLONE_NEWNET): Operation not permitted`), so the owner is always named."""
    net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        owner = int(fcntl.ioctl(net, NS_GET_USERNS))
    finally:
        os.close(net)
    if os.fstat(owner).st_ino == os.stat("/proc/self/ns/user").st_ino:
        os.close(owner)  # our own user namespace: nothing to join
        return None
    return owner


def _kill(pid: int | None) -> None:
    """SIGKILL the sandbox's first process (it has not run the command yet: it waits on --block-fd)."""
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _configure(pid: int, extra: list[str], owner: int | None) -> str:
    """Set up tap0 in the sandbox's network namespace and close every non-internet range; '' or what failed.

    tap0 is configured here, not by slirp4netns (its --configure also brings `lo` up, which bubblewrap does itself
    once released: both would race for 127.0.0.1)."""
    enter = [NSENTER, f"--net=/proc/{pid}/ns/net",
             *([] if owner is None else [f"--user=/proc/self/fd/{owner}", "--preserve-credentials"])]
    setup = [["link", "set", "tap0", "mtu", "65520"], ["addr", "add", SLIRP_ADDRESS, "dev", "tap0"],
             ["link", "set", "tap0", "up"], ["route", "add", "default", "via", SLIRP_GATEWAY, "dev", "tap0"]]
    setup += [["route", "add", "unreachable", route] for route in blocked_routes(extra)]
    for command in setup:
        done = subprocess.run([*enter, IP, *command], capture_output=True, text=True, timeout=10,
                              pass_fds=() if owner is None else (owner,))
        if done.returncode != 0:
            return f"could not set up the sandbox's network (ip {' '.join(command)}): {done.stderr.strip()}"
    return ""


def main(argv: list[str]) -> int:
    """`netjail.py [--block CIDR]... -- bwrap ARGS...`: run bubblewrap with the public network set up."""
    try:
        extra, bwrap = _parse(argv)
    except ValueError as exc:
        return _fail(str(exc))
    slirp = available()
    if slirp is None:
        return _fail(f"the public network needs slirp4netns, which was not found: {INSTALL_HINT}")
    info_r, info_w = os.pipe()
    block_r, block_w = os.pipe()
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()  # slirp4netns ends when this launcher does (the write end closes)
    child = subprocess.Popen([bwrap[0], "--info-fd", str(info_w), "--block-fd", str(block_r), *bwrap[1:]],
                             pass_fds=(info_w, block_r))
    os.close(info_w)
    os.close(block_r)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda n, _f: child.send_signal(n))
    slirp_proc: subprocess.Popen[bytes] | None = None
    pid: int | None = None
    released = False
    try:
        pid = _child_pid(info_r)
        if pid is None:
            return child.wait() or _fail("bubblewrap did not start")
        owner = _owner_userns(pid)
        userns = [] if owner is None else [f"--userns-path=/proc/self/fd/{owner}"]
        slirp_proc = subprocess.Popen(
            [slirp, "--mtu=65520", "--disable-host-loopback", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}",
             *userns, str(pid), "tap0"],
            pass_fds=(ready_w, exit_r, *(() if owner is None else (owner,))), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(ready_w)
        os.close(exit_r)
        if os.read(ready_r, 1) != b"1":
            error = slirp_proc.stderr.read().decode(errors="replace")[-500:] if slirp_proc.stderr else ""
            return _fail(f"slirp4netns could not attach the network: {error.strip()}")
        failed = _configure(pid, extra, owner)
        if failed:
            return _fail(failed)
        os.write(block_w, b"1")  # the routes hold: bubblewrap goes on
        released = True
        return child.wait()
    finally:
        if not released:  # killed before its wait on --block-fd ends: the command never runs
            _kill(pid)
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(exit_w)
        if slirp_proc is not None:
            try:
                slirp_proc.wait(5)
            except subprocess.TimeoutExpired:
                slirp_proc.kill()
        for fd in (info_r, ready_r, block_w):
            try:
                os.close(fd)
            except OSError:
                pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
