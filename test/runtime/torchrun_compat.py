# torchrun (torch.distributed.run) of Debian's python3-torch 1.13 under
# Python 3.11: Std.from_str returns None for "0".."3" (enum comparison
# changed), so every launch fails. This wrapper fixes that one function and
# runs torchrun unchanged; the tests use it to start the runtime's probe
# program under the real torchrun (agent store included).
import re, sys
from torch.distributed.elastic.multiprocessing import api
_orig = api.Std.from_str.__func__
def _from_str(cls, vm):
    if re.fullmatch(r"[0-3]", vm):
        return cls(int(vm))
    return _orig(cls, vm)
api.Std.from_str = classmethod(_from_str)
from torch.distributed.run import main
main()
