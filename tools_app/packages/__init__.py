"""The package store's Django side: which installs exist, which tool runs which, the install task."""
