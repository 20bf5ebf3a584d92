"""Ray, the engine lanes run on: a local Ray that listens on loopback only, or an existing cluster
(`reproduce --cluster ADDRESS`), and the tasks a lane becomes there (`capsule.cluster.ray_runtime`).
What a lane is and where its units go stays `capsule.pipeline.lanes`'s; docs/cluster.md says how to
start a cluster."""
