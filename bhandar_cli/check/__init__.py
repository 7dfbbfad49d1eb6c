"""`bhandar check`: run anyone's nodes (Maelstrom's protocol) under Bhandar's faults and checkers."""
