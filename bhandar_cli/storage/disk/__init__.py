"""The storage engine's disk layer: the `Disk` interface, the real disk and the simulated disk of
crash tests. (The thread a node runs its fsyncs on is node/sync_worker.py; the data directory's
lock is store/data_dir_lock.py.)"""
