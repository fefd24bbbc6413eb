/* SPDX-License-Identifier: MIT */
/* Reading and writing small kernel and state files relative to a directory fd ("fd first, path second"). */
#pragma once

#include <dirent.h>
#include <stddef.h>

/* Read a whole file (up to 4 MiB). dir_fd may be AT_FDCWD. */
int read_full_file_at(int dir_fd, const char *path, char **ret, size_t *ret_size);
/* Read the first line without its newline. */
int read_one_line_at(int dir_fd, const char *path, char **ret);
/* Write s (no newline added) with one write() so the kernel sees it as one store. O_WRONLY, no create. */
int write_string_at(int dir_fd, const char *path, const char *s);
/* Atomically replace path with data: temp file in the same directory, fsync, rename, fsync dir. */
int write_file_atomic_at(int dir_fd, const char *path, const char *data, size_t size, int mode);
/* mkdir -p of a path relative to dir_fd. */
int mkdir_p_at(int dir_fd, const char *path, int mode);
/* A directory stream of path relative to dir_fd ("." opens dir_fd itself anew, so the stream owns its own
 * descriptor and offset); NULL with errno set. */
DIR *opendir_at(int dir_fd, const char *path);
