#pragma once

// Entry header of the ddp runtime: what programs migrated by ddpify include.

#include <ddp/checkpoint.h>
#include <ddp/data.h>
#include <ddp/data_parallel.h>
#include <ddp/distributed.h>
#include <ddp/rollouts.h>
#include <ddp/rows.h>
#include <ddp/sync_batch_norm.h>
#include <ddp/zero_redundancy_optimizer.h>
