import sys

from harness.cli import main

# Guarded: the metric writer is a spawned process, which imports __main__.
if __name__ == "__main__":
    sys.exit(main())
