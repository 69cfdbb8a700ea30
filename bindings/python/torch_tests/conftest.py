import os
import sys

# Import the package from this source tree when PYTHONPATH does not already point at it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
