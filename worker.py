"""The worker's entry point: ``python worker.py`` (the compose file's ``worker`` service and the
image's default command) runs one Temporal worker on the ``STATEKEEPER_*`` settings.

The wiring itself lives in ``starter.runtime.worker``.
"""

from starter.runtime.worker import main

if __name__ == "__main__":
    main()
