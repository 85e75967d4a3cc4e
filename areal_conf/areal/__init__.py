"""What AReaL is made of: its versions, the engine roles it builds, the GPUs its local
scheduler sees.
"""
