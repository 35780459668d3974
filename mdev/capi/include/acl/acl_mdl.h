/*
 * mdev -- emulated Ascend NPU boards behind the CANN Runtime API.
 *
 * acl/acl_mdl.h: the aclmdl* (offline model) declarations come with other CANN packages; of them,
 * only the two stream flags aclmdlRIBindStream (acl_rt.h) takes, which programs of model runtime
 * instances name (the model_ri samples).
 *
 * Written by the mdev project from the published CANN Runtime API (API version 1.17.0):
 * every name, type, structure layout, enumerator value, constant and prototype follows the
 * published API, so that CANN programs build against this tree and link mdev's libraries.
 * The API is documented in the CANN Runtime guides; the comments here only group things.
 */

#ifndef MDEV_ACL_MDL_H
#define MDEV_ACL_MDL_H

/* aclmdlRIBindStream: a stream that runs from the model's start, or one activated later */
#define ACL_MODEL_STREAM_FLAG_HEAD 0x00000000U
#define ACL_MODEL_STREAM_FLAG_DEFAULT 0x7FFFFFFFU

#endif /* MDEV_ACL_MDL_H */
