"""The cost model: what a plan costs to generate on a device (`capsule plan cost`, reproduce's cost
lines, the lanes' placement): the throughput and response-length tables, a plan's estimate, its
arrangement on N lanes, and the printed lines. Below `authoring` (which sizes new plans with it) and
`pipeline` (which places lane units by it); it reads plans and the machine, nothing above them."""
