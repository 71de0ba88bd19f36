/* export — `gentrain export`: writes a trained model in another tool's format. Today
 * one format, hf: a Hugging Face GPT-2 folder (config.json + model.safetensors,
 * io/hf/hf_gpt2.h) that transformers.GPT2LMHeadModel.from_pretrained loads as it is. */
#ifndef GT_EXPORT_H
#define GT_EXPORT_H

/* The verb on argv[first..argc): returns the process exit status (0, 1 failure, 2
 * usage), having printed one line per error. */
int export_command(int argc, char **argv, int first);

#endif
