"""What AReaL is made of: its versions, the engine roles it builds, what a driver script
builds, the GPUs its local scheduler sees.
"""
