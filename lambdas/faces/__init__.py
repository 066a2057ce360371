"""One package per protocol face: its routes for both functions, request and response models, and error
rendering. `catalog.FACES` lists them for the handlers."""
