"""Demo servers `make run` registers as tools (never used for anything but the demo)."""
