# e3nn/e3nn#519 "Torch 2.6+: _pickle.UnpicklingError: Weights only load failed."
# (https://github.com/e3nn/e3nn/issues/519): torch 2.6.0 changed torch.load's weights_only
# default to True, and a whole pickled module no longer loads without weights_only=False.
import io

import torch

buffer = io.BytesIO()
torch.save(torch.nn.Linear(2, 2), buffer)
buffer.seek(0)
model = torch.load(buffer)
print(type(model).__name__)
