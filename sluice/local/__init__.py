"""The local runtime: the same handlers on an embedded moto server. moto is the `local` extra
(`pip install 'sluice[local]'`; `uv sync` installs it), never a requirement of the Lambdas or Glue jobs."""

import importlib.util

if importlib.util.find_spec("moto") is None:
    raise ModuleNotFoundError("the local runtime needs moto: pip install 'sluice[local]'", name="moto")
