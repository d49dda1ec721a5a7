"""The mechanics stage: what a mechanism is, independent of any tool or model.

* :mod:`.mechanism`  the mechanism file (bodies, gravity, inputs, springs), checked
* :mod:`.natural`    natural coordinates: layout, mass matrix, generalized forces, springs
* :mod:`.rotations`  quaternions and rotation matrices (the one implementation)
"""
