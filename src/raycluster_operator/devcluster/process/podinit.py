"""PID 1 of a pod's namespace: reaps orphans until killed.

Run as a script by path (never imported), so it starts fast and needs only the stdlib.
Killing this process makes the kernel kill every other process of the pod.
"""

import os
import signal


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])
    while True:
        try:
            os.wait()
        except ChildProcessError:
            signal.sigtimedwait([signal.SIGCHLD], 1.0)


if __name__ == "__main__":
    main()
