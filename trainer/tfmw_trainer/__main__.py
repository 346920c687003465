"""`python -m tfmw_trainer`: train a digit classifier under MultiWorkerMirroredStrategy.

Its first lines hold SIGTERM and SIGUSR1. The kernel drops a signal sent to PID 1 that PID 1
has no handler for, but keeps a blocked one pending: a SIGTERM during start-up then waits
until `cli.run_as_child` has its handler, rather than being lost while the pod waits out its
grace period. `_signal` rather than `signal`, which imports `enum` first (milliseconds). The
image holds them even sooner, from before Python starts (`env --block-signal=TERM,USR1
python3 -m tfmw_trainer`; a blocked signal stays blocked, and pending, across exec): see
docs/training-program.md, "SIGTERM, as PID 1". Under the pod's supervisor the trainer is not
PID 1, and a signal it has no handler for yet ends it at once.
"""

import _signal  # type: ignore[import-not-found]

if __name__ == "__main__":
    _signal.pthread_sigmask(_signal.SIG_BLOCK, {_signal.SIGTERM, _signal.SIGUSR1})

from tfmw_trainer.cli import main

if __name__ == "__main__":
    main()
