import sys

from onnxport.cli import main

sys.exit(main())
