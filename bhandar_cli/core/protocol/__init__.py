"""What nodes and clients say to each other: messages, effects, and the operations a node
waits on."""
