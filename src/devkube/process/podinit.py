"""PID 1 of a pod's namespace: reaps orphans, and ends the pod when the runtime goes away.

Run as `python -I -c <this text>` (never imported), so it starts fast, needs only the stdlib
and does not depend on a path the pod may not see.
Its exit makes the kernel kill every other process of the pod. argv[1] is the read end of a
pipe whose write end only the runtime holds: end of file means the runtime is gone (even
killed with SIGKILL), and the pod must not outlive it.
"""

import os
import select
import signal
import sys


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    lifeline = int(sys.argv[1])
    while True:
        _reap()
        ready, _, _ = select.select([lifeline], [], [], 0.5)
        if ready and not os.read(lifeline, 1):
            os._exit(0)


if __name__ == "__main__":
    main()
