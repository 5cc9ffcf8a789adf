"""The resident's command line names this file (resident.py inside the sandbox).

It only imports the resident's body (resident_serve.py, beside it): a script is compiled
at every start, a module loads from the bytecode the host cached beside it (install_scripts),
which on a sandbox's few commands is a large part of the resident's CPU.
"""

import sys

sys.path.append(__file__.rpartition("/")[0])  # -I left this folder off sys.path
import resident_serve  # type: ignore[import-not-found]  # (inside the sandbox)

resident_serve.main()
