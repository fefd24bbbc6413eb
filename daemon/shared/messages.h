/* SPDX-License-Identifier: MIT */
/* Fixed journal MESSAGE_IDs, one per class of state change (journalctl MESSAGE_ID=... finds them). */
#pragma once

#define RTD_MSG_STARTED             "995c713db0d94a788d84f635d22b9624"
#define RTD_MSG_RELOADED            "4cbcfe93a23e4ba1af85c0c6e8a8605b"
#define RTD_MSG_RELOAD_FAILED       "36fe4dc2a66e44149443704077dc1bd4"
#define RTD_MSG_RESERVED            "2b016498f8234356b0a334bd2f0100a5"
#define RTD_MSG_RELEASED            "818aa36935c940c99b8c635b5830c70b"
#define RTD_MSG_JOB_SUBMITTED       "95787b94a4ab4dcf892a2080aac4322c"
#define RTD_MSG_JOB_STARTED         "b26381f93edf4a41857121e213dd172a"
#define RTD_MSG_JOB_FINISHED        "2a392010d6f14b89b8c27109efa5f858"
#define RTD_MSG_IRQ_UNMOVABLE       "3cb01532625b4464915ca2aeef8fdf9f"
#define RTD_MSG_DRIFT               "2d667808096b4fbca52735254f73826b"
#define RTD_MSG_RESTORED            "05262fdc00514f56b6f1c2b115d9dadc"
#define RTD_MSG_WORKER_DIED         "3b8c5095e2e648a8a856090fd2b00e0c"
#define RTD_MSG_STARVATION_BOOST    "73eb98e97b9d42029fd011d4a0809267"
