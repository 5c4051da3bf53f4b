"""Models: teacher builders and loaders, greedy generation (layers and students join here)."""
