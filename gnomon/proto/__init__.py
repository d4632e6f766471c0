"""gnomon's protocol buffers: the HoraeDB-compatible client protocol (``storage.proto``,
``common.proto``) and the Python modules generated from them by ``generate.py``."""
