/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl_op.h: empty, as in the runtime package (kept so that acl.h / acl_base.h
 * include the same files); the aclop* (single-operator) declarations come with other CANN packages.
 *
 * Written by the mdev project from the published CANN Runtime API (API version 1.17.0):
 * every name, type, structure layout, enumerator value, constant and prototype follows the
 * published API, so that CANN programs build against this tree and link mdev's libraries.
 * The API is documented in the CANN Runtime guides; the comments here only group things.
 */

#ifndef MDEV_ACL_OP_H
#define MDEV_ACL_OP_H

#endif /* MDEV_ACL_OP_H */
