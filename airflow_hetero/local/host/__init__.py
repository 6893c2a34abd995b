"""The hosts the offline endpoint starts: one local process per host of every instance group.

``process`` (start, read, end a host), ``launch`` (its command line and environment),
``toolkit_env`` (the sagemaker-training toolkit's ``SM_*`` variables and banner), and the two
files that run inside host processes, stdlib only and found by path: ``shim`` (each host's first
process, a child subreaper) and ``resolver`` (copied as ``sitecustomize.py`` so the host names
resolve). Nothing here knows of jobs, records or requests.
"""
