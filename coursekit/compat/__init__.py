"""Where the course meets what its environment may lack: the JAX versions it supports
(``jaxapi``: every API that differs between the floor and the pin, bridged once) and the
packages an accelerator image may not ship (``optional``: named, never a traceback)."""
