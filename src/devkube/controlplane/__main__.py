"""`python -m devkube.controlplane build [MODULE ...]`: build (or find cached) the real
control plane's binaries, printing progress and the time taken (what `make kube` runs).

Exit codes: 0 built or cached; 1 a build failed; 3 no Go toolchain (the Makefile decides
whether that fails the run: it does under CI=true)."""

from __future__ import annotations

import argparse
import sys
import time

from devkube.controlplane import build


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devkube.controlplane")
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("build", help="build the pinned binaries into the cache")
    make.add_argument("modules", nargs="*", default=build.modules())
    where = commands.add_parser("path", help="print a module's cached binary directory")
    where.add_argument("module")
    args = parser.parse_args(argv)
    try:
        if args.command == "path":
            print(build.ensure_built(args.module).directory)
            return 0
        started = time.monotonic()
        for module in args.modules:
            built = build.ensure_built(module)
            if built.seconds == 0:
                print(f"[kube build] {module}: cached in {built.directory}", file=sys.stderr)
        print(
            f"[kube build] {', '.join(args.modules)} ready in {time.monotonic() - started:.0f} s",
            file=sys.stderr,
        )
    except build.BuildError as error:
        print(f"[kube build] {error}", file=sys.stderr)
        return 3 if "no Go toolchain" in str(error) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
