"""Reports people read: HTML with charts (and Markdown/JSON where a command asks for them)."""
