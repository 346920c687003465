"""`python -m tfmw_trainer`: train a digit classifier under MultiWorkerMirroredStrategy.

Its first lines hold SIGTERM and SIGUSR1. The kernel drops a signal sent to PID 1 that PID 1
has no handler for, but keeps a blocked one pending: a SIGTERM during start-up then waits
until `cli.run_as_child` has its handler, rather than being lost while the pod waits out its
grace period. `_signal` rather than `signal`, which imports `enum` first (about 20 ms here);
the image runs `python3 -S -m tfmw_trainer`, which skips the site packages (another 10 to
20 ms) until the signals are held. What stays exposed is Python's own start-up before the
first line (docs/training-program.md, "SIGTERM, as PID 1"). Under the pod's supervisor the
trainer is not PID 1, and a signal it has no handler for yet ends it at once.
"""

import _signal  # type: ignore[import-not-found]

if __name__ == "__main__":
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTERM, _signal.SIGUSR1})
    import sys

    if sys.flags.no_site:
        import site

        site.main()  # what `python3` without -S does at start-up

from tfmw_trainer.cli import main

if __name__ == "__main__":
    main()
