"""Layer 1, the models: the offline model (its fact reader, Bedrock's request rules, its voices), the backends and the
local Bedrock endpoint, the embedders, the AWS session, and the wrappers that record or meter calls. Imports only
from `companion.support`."""
