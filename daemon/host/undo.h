/* SPDX-License-Identifier: MIT */
/* Every owner of a journal kind hands the journal its undo: called once before any journal is replayed. */
#pragma once

void host_register_undos(void);
