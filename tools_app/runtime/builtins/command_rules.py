"""Data tables for execute_command: the default allowlist and per-program argument rules.

Decision on package scripts: npm, pnpm and yarn run only subcommands that run no package script
(`run`, `test`, `start`, `exec`... are refused; yarn and pnpm treat an unknown subcommand as a script
name, hence an allowlist), and installing ones get `--ignore-scripts` (plus `npm_config_ignore_scripts`
in the environment), so no lifecycle script of the project or of a dependency runs.

Decision on git: only builtin subcommands from GIT_SUBCOMMANDS run (an alias can never be named),
and hardening.py neutralises repository config that would run a program.

Decision on interpreters: python, python3, node and java run arbitrary code given on the command
line (`-c`, `-e`, `-p`, java's `-XX:OnError=<shell command>`, single-file source launch), so they are
left out of the default allowlist and need a per-tenant opt-in (`BuiltinContext.interpreters_allowed`);
even then their inline-code flags stay refused. Build tools (mvn, gradle, pip...) run project code by
design; that code runs inside the bubblewrap sandbox (sandbox.py: no network, the workspace the only
writable path), and execute_command stays DESTRUCTIVE, approval-gated and disabled by default.
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
    allowed_subcommands: frozenset[str] | None = None  # when set, any other subcommand is refused


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
    allowed_subcommands=frozenset(
        """add am annotate apply archive blame branch bundle cat-file check-attr check-ignore check-mailmap
        check-ref-format checkout checkout-index cherry cherry-pick clean clone column commit commit-graph
        commit-tree config count-objects describe diff diff-files diff-index diff-tree fetch fmt-merge-msg
        for-each-ref format-patch fsck gc get-tar-commit-id grep hash-object index-pack init init-db
        interpret-trailers log ls-files ls-remote ls-tree mailinfo mailsplit merge merge-base merge-file
        merge-tree mktag mktree multi-pack-index mv name-rev pack-objects pack-refs prune prune-packed pull
        push range-diff read-tree rebase reflog remote repack rerere reset restore rev-list rev-parse revert
        rm shortlog show show-branch show-index show-ref sparse-checkout stage stash status stripspace switch
        symbolic-ref tag unpack-file unpack-objects update-index verify-commit verify-pack verify-tag version
        whatchanged worktree write-tree""".split()
    ),
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
            # These run package scripts by design (even with --ignore-scripts for the named one).
            "run",
            "run-script",
            "rum",
            "urn",
            "test",
            "tst",
            "t",
            "start",
            "stop",
            "restart",
            "install-test",
            "it",
            "install-ci-test",
            "cit",
            "rebuild",
            "rb",
            "publish",
        }
    ),
    allowed_subcommands=frozenset(
        """install i ci add remove rm r uninstall un unlink update up upgrade ls list ll la outdated view info
        show v why explain audit prune dedupe ddp pack version link ln fund doctor bin root prefix pkg query
        sbom shrinkwrap whoami search ping dedup""".split()
    ),
    abbreviations=False,
)

# Subcommands of npm/pnpm/yarn that would run lifecycle scripts: `--ignore-scripts` is appended.
SCRIPT_RUNNING_INSTALLS = frozenset(
    "install i ci add remove rm r uninstall un unlink update up upgrade prune dedupe ddp dedup pack version link ln".split()
)

JAVAC = ProgramRules(
    forbidden_options=frozenset({"-processor", "-processorpath", "--processor-path", "-J", "-Xplugin"}),
    forbidden_prefixes=("-J", "-Xplugin", "@"),
)

GRADLE = ProgramRules(
    forbidden_options=frozenset({"-I", "--init-script", "-D", "--project-cache-dir"}),
    forbidden_prefixes=("-D", "-I"),
)

# pip builds what it installs by running the package's own code (setup.py, a build backend, `pip download` of an
# sdist too): that is an interpreter's power, so without the tenant's python opt-in pip may only inspect.
PIP_WITHOUT_PYTHON = ProgramRules(
    allowed_subcommands=frozenset("list show freeze check inspect help hash cache config debug index uninstall".split()),
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
