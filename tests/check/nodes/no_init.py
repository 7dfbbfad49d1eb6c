"""Reads its input and never answers anything, init included."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from tests.check.nodes.maelnode import record_pid

record_pid()
while os.read(0, 65536):
    pass
