/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl.h: the umbrella header a CANN program includes.
 *
 * Written by the mdev project from the published CANN Runtime API (API version 1.17.0):
 * every name, type, structure layout, enumerator value, constant and prototype follows the
 * published API, so that CANN programs build against this tree and link mdev's libraries.
 * The API is documented in the CANN Runtime guides; the comments here only group things.
 */

#ifndef MDEV_ACL_H
#define MDEV_ACL_H

#include "acl_rt.h"
#include "acl_op.h"
#include "acl_mdl.h"

#endif /* MDEV_ACL_H */
