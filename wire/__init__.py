"""The wire format between ldpfed's Flower halves: message kinds, record keys and codecs
(`wire.records`), below both `clients/` and `server/`, which never import each other."""
