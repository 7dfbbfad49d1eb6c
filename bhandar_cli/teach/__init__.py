"""The classroom demos as data, their runner and their narration."""
