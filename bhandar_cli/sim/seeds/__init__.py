"""The seed's four teaching simulators, ported exactly from JavaScript."""
