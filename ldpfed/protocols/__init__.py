"""Federated protocols without Flower (spec: federated.md).

Each task has a client half (what a client computes from its data, the round's broadcast and its
own secret stream) and a server half shaped like a Flower Strategy (configure a round, aggregate
the replies, evaluate): `mean` (tuple collection) and `train` (federated LDP-SGD). `seeds` says
who draws which randomness; `diagnostics` joins the clients' clean values with the server's
aggregate outside the protocol; `session` is the per-round record and summary; `privacy` decides
whether a run is private. `clients/` and `server/` are thin Flower adapters around these halves.
"""
