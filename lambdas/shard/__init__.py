"""Lambda handlers: parse, one call into sluice, map the result."""
