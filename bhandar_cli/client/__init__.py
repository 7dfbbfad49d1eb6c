"""The one client API the faces use: `Client`, its backends, and operations built on it."""
