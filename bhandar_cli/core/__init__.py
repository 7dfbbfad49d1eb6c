"""The sans-I/O core: plain synchronous logic, handed `now` and a `random.Random`."""
