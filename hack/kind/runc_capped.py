#!/usr/bin/python3 -S
# Installed as runc-capped: dockerd's runtime here, and the kind node's containerd's.
"""runc, asked only for capabilities this machine can grant.

`docker run --privileged` (kind's node) and privileged pods ask for every capability,
and runc fails with "unable to apply caps: operation not permitted" when the bounding
set lacks one: on this VM root has no CAP_SYS_RESOURCE. This drops from the container's
spec (the bundle's config.json on create/run, the --process file on exec) each
capability outside our own bounding set, then hands over to runc. Where nothing is
missing it changes nothing. hack/kind.sh registers it with dockerd, and the node
image's containerd uses it, only on a machine that needs it.
"""

import json
import os
import sys

RUNC = os.environ.get("TFMW_REAL_RUNC", "/usr/sbin/runc")
# Capability numbers, as in linux/capability.h.
NAMES = [
    "CHOWN",
    "DAC_OVERRIDE",
    "DAC_READ_SEARCH",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "SETPCAP",
    "LINUX_IMMUTABLE",
    "NET_BIND_SERVICE",
    "NET_BROADCAST",
    "NET_ADMIN",
    "NET_RAW",
    "IPC_LOCK",
    "IPC_OWNER",
    "SYS_MODULE",
    "SYS_RAWIO",
    "SYS_CHROOT",
    "SYS_PTRACE",
    "SYS_PACCT",
    "SYS_ADMIN",
    "SYS_BOOT",
    "SYS_NICE",
    "SYS_RESOURCE",
    "SYS_TIME",
    "SYS_TTY_CONFIG",
    "MKNOD",
    "LEASE",
    "AUDIT_WRITE",
    "AUDIT_CONTROL",
    "SETFCAP",
    "MAC_OVERRIDE",
    "MAC_ADMIN",
    "SYSLOG",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
    "AUDIT_READ",
    "PERFMON",
    "BPF",
    "CHECKPOINT_RESTORE",
]


def bounding_set(status: str = "/proc/self/status") -> set[str]:
    with open(status) as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("CapBnd:"))
    return {"CAP_" + name for bit, name in enumerate(NAMES) if mask >> bit & 1}


def value_after(args: list[str], *flags: str) -> str | None:
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(flag + "="):
                return arg.split("=", 1)[1]
    return None


def subcommand(args: list[str]) -> str | None:
    """runc's subcommand: the first word that is neither a global flag nor its value."""
    valued = {"--root", "--log", "--log-format", "--criu", "--rootless"}
    i = 0
    while i < len(args):
        if args[i] in valued:
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return args[i]
    return None


def keep_grantable(path: str, process_only: bool, held: set[str]) -> None:
    """Rewrites the spec at `path` with only the capabilities in `held`; untouched if all are."""
    with open(path) as f:
        spec = json.load(f)
    process = spec if process_only else spec.get("process") or {}
    caps = process.get("capabilities") or {}
    if all(c in held for values in caps.values() for c in values or []):
        return
    for key, values in caps.items():
        caps[key] = [c for c in values or [] if c in held]
    with open(path, "w") as f:
        json.dump(spec, f)


def spec_to_fix(args: list[str]) -> tuple[str, bool] | None:
    """The file runc will read the capabilities from, and whether it is a process (exec)."""
    command = subcommand(args)
    if command in ("create", "run"):
        return os.path.join(value_after(args, "--bundle", "-b") or ".", "config.json"), False
    process = value_after(args, "--process", "-p") if command == "exec" else None
    return (process, True) if process else None


def main() -> None:
    args = sys.argv[1:]
    found = spec_to_fix(args)
    if found:
        keep_grantable(*found, held=bounding_set())
    os.execv(RUNC, [RUNC, *args])


if __name__ == "__main__":
    main()
