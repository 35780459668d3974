/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl_base.h: base types plus both error-code tables.
 *
 * Written by the mdev project from the published CANN Runtime API (API version 1.17.0):
 * every name, type, structure layout, enumerator value, constant and prototype follows the
 * published API, so that CANN programs build against this tree and link mdev's libraries.
 * The API is documented in the CANN Runtime guides; the comments here only group things.
 */

#ifndef MDEV_ACL_BASE_H
#define MDEV_ACL_BASE_H

#include "acl/acl_base_rt.h"
#include "acl/acl_base_mdl.h"
#include "error_codes/rt_error_codes.h"
#include "error_codes/ge_error_codes.h"

#endif /* MDEV_ACL_BASE_H */
