"""Code that runs inside pods the operator builds, not in the operator.

Each module here is self-contained (the standard library and Ray only): the builders embed
its source in a container command, because the pod's image is the user's Ray image, which
does not have this package installed.
"""
