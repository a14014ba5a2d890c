"""Data tables for execute_command: the default allowlist and per-program argument rules.

Decision on interpreters: python, python3, node and java run arbitrary code given on the command
line (`-c`, `-e`, `-p`, java's `-XX:OnError=<shell command>`, single-file source launch), so they are
left out of the default allowlist and need a per-tenant opt-in (`BuiltinContext.interpreters_allowed`);
even then their inline-code flags stay refused. Build tools (npm, mvn, gradle, pip...) run project code
by design: the workspace is not an operating-system sandbox, which is why execute_command is
DESTRUCTIVE, approval-gated and disabled by default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

RUOYI_ALLOWLIST = frozenset(
    "npm pnpm yarn git mvn gradle java javac python python3 pip node tsc eslint prettier cat ls dir echo".split()
)
INTERPRETERS = frozenset({"python", "python3", "node", "java"})
DEFAULT_ALLOWLIST = RUOYI_ALLOWLIST - INTERPRETERS

# Characters a shell would interpret; there is no shell, but refusing them keeps intent unambiguous.
SHELL_METACHARACTERS = (";", "|", "&", "`", "$", "(", ")", "<", ">", "\n", "\r", "\x00")


@dataclass(frozen=True)
class ProgramRules:
    """What one program may not be given. Long options also match their unambiguous abbreviations
    (git's option parser accepts `--out` for `--output`)."""

    forbidden_options: frozenset[str] = frozenset()  # exact short/long options, `--opt=value` matches too
    forbidden_short_letters: str = ""  # letters refused inside a short-option cluster such as `-Sc`
    forbidden_prefixes: tuple[str, ...] = ()  # any argument starting with one of these
    forbidden_subcommands: frozenset[str] = frozenset()
    # sub -> (read actions, one of which must be present; harmless modifiers)
    read_only_subcommands: dict[str, tuple[frozenset[str], frozenset[str]]] = field(default_factory=dict)
    subcommand_options: dict[str, frozenset[str]] = field(default_factory=dict)  # sub -> refused options
    path_options: frozenset[str] = frozenset()  # options whose value is a path that must stay inside
    abbreviations: bool = False


GIT = ProgramRules(
    forbidden_options=frozenset(
        {
            "-c",
            "--config-env",
            "--exec-path",
            "--output",
            "--upload-pack",
            "--receive-pack",
            "--exec",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--super-prefix",
            "--template",
            "--config",
            "--open-files-in-pager",
            "-O",
            "--ext-diff",
            "--textconv",
            "--extcmd",
        }
    ),
    forbidden_prefixes=("ext::", "fd::", "file:", "-c", "-O"),
    forbidden_subcommands=frozenset(
        {
            "filter-branch",
            "submodule",
            "bisect",
            "difftool",
            "mergetool",
            "daemon",
            "instaweb",
            "web--browse",
            "credential",
            "credential-store",
            "credential-cache",
            "upload-pack",
            "receive-pack",
            "shell",
            "upload-archive",
            "remote-ext",
            "remote-fd",
            "hook",
            "fsmonitor--daemon",
            "help",
            "var",
            "update-ref",
            "replace",
            "notes",
            "alias",
            "send-email",
            "imap-send",
            "p4",
            "svn",
            "cvsimport",
            "archimport",
            "quiltimport",
            "http-backend",
            "http-fetch",
            "fast-import",
            "run-command",
        }
    ),
    read_only_subcommands={
        "config": (
            frozenset({"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}),
            frozenset({"--show-origin", "--show-scope", "--local", "--null", "-z", "--name-only"}),
        ),
    },
    subcommand_options={
        "rebase": frozenset({"--exec", "-x", "-i", "--interactive"}),
        "clone": frozenset({"-u", "--upload-pack", "--template", "--config", "-c", "--recurse-submodules"}),
        "fetch": frozenset({"--upload-pack", "--recurse-submodules"}),
        "pull": frozenset({"--upload-pack", "--recurse-submodules"}),
        "push": frozenset({"--receive-pack", "--exec"}),
        "ls-remote": frozenset({"--upload-pack", "--exec"}),
        "archive": frozenset({"--exec", "--remote", "--output", "-o"}),
        "grep": frozenset({"-O", "--open-files-in-pager"}),
        "commit": frozenset({"--template"}),
    },
    path_options=frozenset({"-C"}),
    abbreviations=True,
)

PYTHON = ProgramRules(
    forbidden_options=frozenset({"-c", "-", "--command"}),
    forbidden_short_letters="c",
    forbidden_prefixes=("-c",),
)

NODE = ProgramRules(
    forbidden_options=frozenset(
        {
            "-e",
            "--eval",
            "-p",
            "--print",
            "-",
            "-i",
            "--interactive",
            "--inspect",
            "--inspect-brk",
            "--inspect-port",
            "--experimental-loader",
            "--loader",
            "--import",
            "-r",
            "--require",
        }
    ),
    forbidden_short_letters="epir",
    forbidden_prefixes=("--inspect",),
)

JAVA = ProgramRules(
    forbidden_options=frozenset(
        {
            "-javaagent",
            "-agentlib",
            "-agentpath",
            "--source",
            "-XX:OnError",
            "-XX:OnOutOfMemoryError",
            "-Xrun",
            "-Xdebug",
            "-jshell",
        }
    ),
    forbidden_prefixes=(
        "-javaagent",
        "-agentlib",
        "-agentpath",
        "-XX:OnError",
        "-XX:OnOutOfMemoryError",
        "-Xrun",
        "@",
    ),
)

JS_PACKAGE_MANAGER = ProgramRules(
    forbidden_options=frozenset(
        {
            "--script-shell",
            "--node-options",
            "--shell",
            "-c",
            "--call",
            "--eval",
            "-e",
            "--require",
            "-r",
            "--userconfig",
            "--globalconfig",
        }
    ),
    forbidden_subcommands=frozenset(
        {
            "exec",
            "x",
            "dlx",
            "explore",
            "node",
            "create",
            "init",
            "edit",
            "set-script",
            "config",
            "c",
            "set",
            "help",
        }
    ),
    abbreviations=False,
)

JAVAC = ProgramRules(
    forbidden_options=frozenset({"-processor", "-processorpath", "--processor-path", "-J", "-Xplugin"}),
    forbidden_prefixes=("-J", "-Xplugin", "@"),
)

GRADLE = ProgramRules(
    forbidden_options=frozenset({"-I", "--init-script", "-D", "--project-cache-dir"}),
    forbidden_prefixes=("-D", "-I"),
)

RULES: dict[str, ProgramRules] = {
    "git": GIT,
    "python": PYTHON,
    "python3": PYTHON,
    "node": NODE,
    "java": JAVA,
    "javac": JAVAC,
    "npm": JS_PACKAGE_MANAGER,
    "pnpm": JS_PACKAGE_MANAGER,
    "yarn": JS_PACKAGE_MANAGER,
    "gradle": GRADLE,
}
